/// EventBridge's "Scheduled Event", as a Schedule rule delivers it to its target: what a scheduled function reads
/// (the gateway's scheduler builds it; the function reads only its `id`).
public struct ScheduledEvent: Encodable, Sendable {
    public var version = "0"
    public var id: String
    public var detailType = "Scheduled Event"
    public var source = "aws.events"
    public var account: String
    /// UTC to the second, RFC 3339.
    public var time: String
    public var region: String
    /// The rule's ARN.
    public var resources: [String]
    /// Always `{}` for a schedule.
    public var detail: [String: String] = [:]

    public init(id: String, account: String, time: String, region: String, resources: [String]) {
        self.id = id
        self.account = account
        self.time = time
        self.region = region
        self.resources = resources
    }

    enum CodingKeys: String, CodingKey {
        case version, id, source, account, time, region, resources, detail
        case detailType = "detail-type"
    }
}
