import Codecs
import FunctionRuntime
import Foundation
import HTTPTypes
import Hummingbird

/// Builds the API Gateway HTTP API 2.0 event for a request, as API Gateway does: lower-case header names with
/// repeated headers comma-joined, cookies apart, the raw query string and its parsed parameters, a request context
/// with id, route, method, path, source IP, user agent and times; a body that is not UTF-8 text is base64. The event is
/// FunctionRuntime's own ``APIGatewayV2Request``, the type the functions decode, encoded with ``JSONCoding``.
enum EventBuilder {
    static func event(
        method: String, path: String, query: String, headers: HTTPFields, body: [UInt8], sourceIP: String,
        routeKey: String, requestID: String, now: Date
    ) -> [UInt8] {
        var joined: [String: String] = [:]
        var cookies: [String] = []
        for field in headers {
            let name = field.name.canonicalName.lowercased()
            if name == "cookie" {
                cookies += field.value.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                    !$0.isEmpty
                }
                continue
            }
            joined[name] = joined[name].map { "\($0),\(field.value)" } ?? field.value
        }
        var context = APIGatewayV2Request.RequestContext(
            requestId: requestID, routeKey: routeKey,
            timeEpoch: Int64((now.timeIntervalSince1970 * 1000).rounded(.down)),
            http: .init(method: method, path: path, sourceIp: sourceIP, userAgent: joined["user-agent"] ?? ""))
        context.accountId = "anonymous"
        context.apiId = "local"
        context.domainName = joined["host"] ?? "localhost"
        context.domainPrefix = "local"
        context.time = accessLogTime(now)
        var event = APIGatewayV2Request(
            routeKey: routeKey, rawPath: path, headers: joined, requestContext: context, isBase64Encoded: false)
        event.rawQueryString = query
        if !cookies.isEmpty { event.cookies = cookies }
        let parameters = queryParameters(query)
        if !parameters.isEmpty { event.queryStringParameters = parameters }
        if !body.isEmpty {
            if isText(contentType: joined["content-type"]), let text = String(validating: body, as: UTF8.self) {
                event.body = text
            } else {
                event.body = Data(body).base64EncodedString()
                event.isBase64Encoded = true
            }
        }
        return JSONCoding.encode(event) ?? []
    }

    /// Parsed query parameters, repeated names comma-joined (API Gateway 2.0).
    static func queryParameters(_ query: String) -> [String: String] {
        var parameters: [String: String] = [:]
        for pair in query.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let value =
                parts.count > 1
                ? (String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(parts[1]))
                : ""
            parameters[name] = parameters[name].map { "\($0),\(value)" } ?? value
        }
        return parameters
    }

    /// JSON, text and forms travel as text; anything else as base64.
    static func isText(contentType: String?) -> Bool {
        guard let contentType else { return true }
        // ASCII-lower-cased bytes, searched as bytes: every request with a body asks.
        let type = contentType.utf8.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }
        func has(_ part: [UInt8]) -> Bool {
            guard part.count <= type.count else { return false }
            return (0...(type.count - part.count)).contains { type[$0..<($0 + part.count)].elementsEqual(part) }
        }
        return textPrefixes.contains { type.starts(with: $0) } || textParts.contains(where: has)
    }

    private static let textPrefixes = ["text/", "application/x-www-form-urlencoded", "application/javascript"].map {
        Array($0.utf8)
    }
    private static let textParts = ["json", "xml"].map { Array($0.utf8) }

    /// `22/Nov/2026:02:00:00 +0000`, API Gateway's `requestContext.time`.
    static func accessLogTime(_ date: Date) -> String {
        let text = Timestamp.rfc3339UTC(Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)))
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let year = text.prefix(4)
        let month = months[(Int(text.dropFirst(5).prefix(2)) ?? 1) - 1]
        let day = text.dropFirst(8).prefix(2)
        let time = text.dropFirst(11).prefix(8)
        return "\(day)/\(month)/\(year):\(time) +0000"
    }
}
