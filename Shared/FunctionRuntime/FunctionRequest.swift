import Codecs
import FoundationEssentials

/// The part of the event an endpoint reads, already checked: the method is the route's, the body is decoded from
/// base64 when it was, and is within the size limit.
public struct FunctionRequest: Sendable {
    public let method: String
    public let path: String
    public let requestID: String
    public let body: [UInt8]
    private let event: APIGatewayV2Request

    /// Checks an API Gateway event against the route and unwraps its body.
    /// - Parameters:
    ///   - event: the parsed event.
    ///   - method: the one method the route accepts.
    ///   - requestID: the invocation's request id (``requestID(of:fallback:)``).
    ///   - bodyLimit: the largest body accepted, after base64 decoding.
    /// - Throws: ``Problem`` 405 for another method, 413 for a body over the limit, 400 for bad base64.
    public init(event: APIGatewayV2Request, method: String, requestID: String, bodyLimit: Int) throws(Problem) {
        let actual = (event.requestContext?.http?.method ?? method).uppercased()
        guard actual == method else { throw Problem.methodNotAllowed(allow: method) }
        var body: [UInt8] = []
        if let text = event.body {
            if event.isBase64Encoded == true {
                // Reject before decoding what cannot fit: base64 grows by 4/3.
                guard text.utf8.count <= (bodyLimit / 3 + 1) * 4 + 4 else {
                    throw Problem.payloadTooLarge(limit: bodyLimit)
                }
                guard let decoded = Data(base64Encoded: text) else {
                    throw Problem.badRequest("The body is marked base64 but is not valid base64.")
                }
                body = Array(decoded)
            } else {
                body = Array(text.utf8)
            }
        }
        guard body.count <= bodyLimit else { throw Problem.payloadTooLarge(limit: bodyLimit) }
        self.event = event
        self.method = actual
        self.path = event.rawPath ?? event.requestContext?.http?.path ?? "/"
        self.requestID = requestID
        self.body = body
    }

    /// A header's value, looked up without regard to letter case.
    public func header(_ name: String) -> String? { event.headerValue(name) }

    /// The event's request id (API Gateway's, else an `x-request-id` header), else the host's, else a new UUID.
    public static func requestID(of event: APIGatewayV2Request, fallback: String?) -> String {
        let candidates = [event.requestContext?.requestId, event.headerValue("x-request-id"), fallback]
        for case let candidate? in candidates where isPrintableID(candidate) { return candidate }
        return UUID().uuidString.lowercased()
    }

    /// A request id is echoed into headers and logs: keep it short and printable.
    public static func isPrintableID(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 128
            && value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }
}
