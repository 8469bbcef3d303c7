import Codecs
import FoundationEssentials

/// `{"ok": true}`, the answer of the device endpoints.
public struct OKBody: Codable, Sendable, Equatable {
    public let ok: Bool
    public init() { ok = true }
}

extension APIGatewayV2Response {
    /// An `application/problem+json` response for `problem`, with its own headers (`Retry-After`, `Allow`, …).
    public static func problem(_ problem: Problem, requestID: String) -> APIGatewayV2Response {
        var headers = problem.headers
        headers["content-type"] = "application/problem+json"
        headers["x-request-id"] = requestID
        headers["cache-control"] = "no-store"
        return APIGatewayV2Response(statusCode: problem.status, headers: headers, body: JSONCoding.string(problem))
    }

    /// A JSON response.
    /// - Throws: when `body` cannot be encoded.
    public static func json(status: Int, body: any Encodable, requestID: String) throws -> APIGatewayV2Response {
        let data = try JSONCoding.encoder().encode(body)
        return APIGatewayV2Response(
            statusCode: status,
            headers: ["content-type": "application/json", "x-request-id": requestID, "cache-control": "no-store"],
            body: String(decoding: data, as: UTF8.self))
    }
}
